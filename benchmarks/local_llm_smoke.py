"""Local-model smoke benchmark. Writes benchmarks/out/local_llm_smoke.json.

Measures, for one local model (default qwen2.5-coder-0.5b): the time to find and verify the weights (joining them
on the first run), the time llama.cpp takes to load them, resident memory added, decode speed of one request
(output tokens over wall time, 128 tokens), throughput with 4 requests in flight, and accuracy on the first N
items of the shipped sentiment set with no system prompt and with a one-word system prompt, under strict exact
match and under `normalized_exact`. Needs ``pip install 'agentgrad[local]'``.
Run `python benchmarks/local_llm_smoke.py --model smollm2-135m --items 10` for a fast pass.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from agentgrad.data import exact, load_set, normalized_exact
from agentgrad.providers.base import Message
from agentgrad.providers.local import LocalModel, local
from agentgrad.providers.weights import find_weights, resolve_weights

OUT = Path(__file__).parent / "out"
SYSTEM = "Reply with exactly one word: positive or negative."


def rss_mib() -> float:
    """Resident memory of this process in MiB (Linux; 0.0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


async def decode_speed(model: LocalModel, in_flight: int) -> dict[str, float]:
    """Output tokens per wall second with `in_flight` requests of up to 128 tokens each."""
    ask = (Message("user", "Write a Python function that merges two sorted lists, with comments."),)
    start = time.perf_counter()
    results = await asyncio.gather(*(model.complete(ask, temperature=0, max_tokens=128) for _ in range(in_flight)))
    wall = time.perf_counter() - start
    tokens = sum(r.usage.output_tokens for r in results)
    return {"in_flight": in_flight, "output_tokens": tokens, "seconds": round(wall, 3),
            "tokens_per_second": round(tokens / wall, 1)}


async def sentiment(model: LocalModel, items: int, system: str | None) -> dict[str, Any]:
    """Accuracy on the first `items` sentiment tasks, 4 in flight, temperature 0."""
    tasks = load_set("sentiment")[:items]
    head = (Message("system", system),) if system else ()
    start = time.perf_counter()
    results = await asyncio.gather(*(model.complete((*head, Message("user", str(t.input))), temperature=0,
                                                    max_tokens=5) for t in tasks))
    outputs = [r.text for r in results]
    return {"system": system, "items": items, "seconds": round(time.perf_counter() - start, 2),
            "strict": sum(exact(o.strip(), t.expected) for o, t in zip(outputs, tasks, strict=True)),
            "normalized": sum(normalized_exact(o, t.expected) for o, t in zip(outputs, tasks, strict=True)),
            "sample": outputs[:4]}


async def measure(model: LocalModel, items: int) -> dict[str, Any]:
    return {"decode_1": await decode_speed(model, 1), "decode_4": await decode_speed(model, 4),
            "sentiment_bare": await sentiment(model, items, None),
            "sentiment_system": await sentiment(model, items, SYSTEM)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {"model": args.model}
    weights = find_weights(args.model)
    if weights is not None:
        start = time.perf_counter()
        resolve_weights(weights)
        report["resolve_weights_seconds"] = round(time.perf_counter() - start, 2)
    before = rss_mib()
    with local(args.model, threads=args.threads) as model:
        report["load_seconds"] = round(model.stats.load_seconds, 2)
        report["rss_added_mib"] = round(rss_mib() - before)
        report.update(asyncio.run(measure(model, args.items)))
    OUT.mkdir(exist_ok=True)
    (OUT / "local_llm_smoke.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
