"""Provider-layer benchmark. Writes benchmarks/out/provider_bench.json.

Measures: the overhead per call of the full middleware stack (Accounting, ConcurrencyLimit, RateLimit,
CircuitBreaker, Retry, Cache) against the bare provider, both on a zero-latency in-process provider (pure
overhead) and over HTTP to the local fake server; the cache's miss and hit costs; and throughput of
`OpenAICompatible` with 1, 4, 16, 64 and 256 calls in flight against the fake server (run in its own process,
on 127.0.0.1), for an instant model and one that answers after 20 ms.
Run `python benchmarks/provider_bench.py --quick` for a smaller, faster pass.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentgrad.providers import (
    Accounting,
    Cache,
    CallableProvider,
    CircuitBreaker,
    Completion,
    ConcurrencyLimit,
    Message,
    Meter,
    OpenAICompatible,
    Provider,
    RateLimit,
    Retry,
    Usage,
    wrap,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).parent / "out"
USER = (Message("user", "benchmark the provider layer please"),)
IN_FLIGHT = (1, 4, 16, 64, 256)


@contextmanager
def fake_server() -> Iterator[str]:
    """The test suite's fake LLM server in a child process; yields its base URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.providers.fake_server"], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def full_stack(provider: Provider, meter: Meter, limit: int) -> Provider:
    """Every layer, in the recommended order; the cache is bypassed at temperature > 0."""
    return wrap(provider, lambda p: Accounting(p, meter), lambda p: ConcurrencyLimit(p, limit),
                lambda p: RateLimit(p, rate=1e9, burst=1_000_000), lambda p: CircuitBreaker(p), lambda p: Retry(p),
                lambda p: Cache(p, ":memory:"))


async def per_call(provider: Provider, n: int, **params: Any) -> float:
    """Mean seconds per call over `n` sequential calls."""
    start = time.perf_counter()
    for _ in range(n):
        await provider.complete(USER, **params)
    return (time.perf_counter() - start) / n


async def _instant(messages: Sequence[Message], **params: Any) -> Completion:
    return Completion("ok", Usage(10, 5), 0.0, "gpt-4o", "stop")


def bench_pure_overhead(n: int) -> dict[str, float]:
    """Microseconds per call: bare in-process provider, full stack, and the cache's miss and hit paths."""
    async def run() -> dict[str, float]:
        bare = CallableProvider(_instant)
        stack = full_stack(bare, Meter(), 16)
        cache = Cache(bare, ":memory:")
        await per_call(stack, 200, temperature=0.7)  # warm up
        direct = min([await per_call(bare, n) for _ in range(3)])
        wrapped = min([await per_call(stack, n, temperature=0.7) for _ in range(3)])
        start = time.perf_counter()
        for i in range(n):
            await cache.complete((Message("user", f"q{i}"),), temperature=0)
        miss = (time.perf_counter() - start) / n
        hit = await per_call(cache, n, temperature=0)
        return {"bare_us": direct * 1e6, "full_stack_us": wrapped * 1e6, "overhead_us": (wrapped - direct) * 1e6,
                "cache_miss_us": miss * 1e6, "cache_hit_us": hit * 1e6}

    return asyncio.run(run())


def bench_http_overhead(url: str, n: int, rounds: int) -> dict[str, float]:
    """Milliseconds per sequential HTTP call, bare vs full stack, interleaved rounds; overhead from the medians."""
    async def run() -> dict[str, float]:
        bare = OpenAICompatible(url + "/v1", model="ok")
        stack = full_stack(bare, Meter(), 16)
        await per_call(stack, 100, temperature=0.7)
        direct, wrapped = [], []
        for _ in range(rounds):
            direct.append(await per_call(bare, n, temperature=0.7))
            wrapped.append(await per_call(stack, n, temperature=0.7))
        await bare.aclose()
        d, w = statistics.median(direct), statistics.median(wrapped)
        return {"bare_ms": d * 1e3, "full_stack_ms": w * 1e3, "overhead_ms": (w - d) * 1e3}

    return asyncio.run(run())


def bench_throughput(url: str, model: str, in_flight: int, n: int) -> dict[str, float]:
    """Calls per second and latency percentiles with `in_flight` workers making `n` calls in all."""
    async def run() -> dict[str, float]:
        provider = full_stack(OpenAICompatible(url + "/v1", model=model, max_connections=max(in_flight, 1)),
                              Meter(), in_flight)
        latencies: list[float] = []

        async def worker() -> None:
            for _ in todo:
                start = time.perf_counter()
                await provider.complete(USER, temperature=0.7)
                latencies.append(time.perf_counter() - start)

        todo = iter(range(2 * in_flight))
        await asyncio.gather(*(worker() for _ in range(in_flight)))  # open the connections first
        latencies.clear()
        todo = iter(range(n))
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - start
        q = statistics.quantiles(latencies, n=100)
        return {"calls_per_s": n / elapsed, "p50_ms": q[49] * 1e3, "p99_ms": q[98] * 1e3}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0
    result: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    result["pure_overhead"] = bench_pure_overhead(int(20_000 * scale))
    print("pure overhead:", json.dumps(result["pure_overhead"]))
    with fake_server() as url:
        result["http_overhead"] = bench_http_overhead(url, int(500 * scale), 5)
        print("http overhead:", json.dumps(result["http_overhead"]))
        result["throughput"] = {}
        for model, calls in (("ok", 3000), ("slow-20ms", 2000)):
            for k in IN_FLIGHT:
                n = max(int(calls * scale), 2 * k)
                row = bench_throughput(url, model, k, n)
                result["throughput"][f"{model}/{k}"] = row
                print(f"throughput {model:>9} in flight {k:>3}:", json.dumps({m: round(v, 2) for m, v in row.items()}))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "provider_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT / 'provider_bench.json'}")


if __name__ == "__main__":
    main()
