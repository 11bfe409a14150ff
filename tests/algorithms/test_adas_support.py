"""What the ADAS and DGM tests share: routing programs a scripted model writes, and a small routing split.

A routing program holds a table, one line per queue it knows: the queue's code and the words its tickets use. It
answers the code of the queue whose words the ticket shares most (``unknown`` when none). A good model learns a
queue from a failed ticket quoted in its prompt (`routing_standin.lessons`) and knows which words tickets of that
queue use (`WORDS`, the words only that queue's tickets have).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

import anyio

from agentgrad.algorithms.adas_code import SandboxSolver
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task
from agentgrad.providers.base import Message
from agentgrad.sandbox import Limits, Sandbox
from agentgrad.testing import routing_standin as routing

FAST = Limits(cpu_seconds=2, memory_bytes=256 << 20, file_bytes=1 << 20, processes=8, wall_seconds=5.0,
              output_bytes=64 << 10)
_WORD = re.compile(r"[a-z]{4,}")
_ENTRY = re.compile(r'\\?"([a-z_]+)\\?": \(\\?"([A-Z]{3}-\d)')
_LESSON = re.compile(r"- (.+) tickets go to ([A-Z]{3}-\d)")
RUN = '''

def run(task_input: str) -> str:
    words = set(re.findall(r"[a-z]{4,}", task_input.lower()))
    best, hits = "unknown", 0
    for code, keys in TABLE.values():
        shared = len(words & set(keys))
        if shared > hits:
            best, hits = code, shared
    return best
'''


def _words() -> dict[str, list[str]]:
    seen: defaultdict[str, set[str]] = defaultdict(set)
    for task in routing.tasks():
        for word in set(_WORD.findall(task.input.lower())):
            seen[word].add(str(task.meta["queue_name"]))
    own: defaultdict[str, list[str]] = defaultdict(list)
    for word, queues in sorted(seen.items()):
        if len(queues) == 1:
            own[next(iter(queues))].append(word)
    return dict(own)


WORDS = _words()


def entry(queue: str, code: str) -> str:
    """The table line of one queue."""
    return f'    "{queue}": ("{code}", {WORDS[queue]!r}),\n'


def program(table: Mapping[str, str]) -> str:
    """A routing program that knows the queues of `table` (queue -> code)."""
    lines = "".join(entry(q, c) for q, c in sorted(table.items()))
    return "import re\n\nTABLE = {\n" + lines + "}\n" + RUN


def known(text: str) -> dict[str, str]:
    """The queues the programs quoted in `text` know (queue -> code)."""
    return dict(_ENTRY.findall(text))


def learned(text: str) -> dict[str, str]:
    """The queues a good model learns from the failed tickets `text` quotes (queue -> code)."""
    return {m.group(1).replace(" ", "_"): m.group(2) for m in map(_LESSON.match, routing.lessons(text)) if m}


def conversation(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages)


def small_splits() -> Splits:
    """48 routing tasks, stratified by queue: 24 to train, 12 to validate, 12 held out."""
    tasks = routing.tasks()
    by_queue: defaultdict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_queue[str(task.meta["queue_name"])].append(task)
    chosen = [t for queue in by_queue.values() for t in queue[:max(4, len(queue) // 2)]]
    return split(chosen, fractions=(0.5, 0.25, 0.25), seed=0, stratify=lambda t: t.meta["queue_name"])


def test_a_program_that_knows_every_queue_routes_every_ticket() -> None:
    solver = SandboxSolver(Sandbox(FAST))
    code = program(routing.queues())
    tasks = routing.tasks()[:6]

    async def answers() -> list[str]:
        return [await solver(code, task) for task in tasks]

    assert [routing.score(t, a) for t, a in zip(tasks, anyio.run(answers), strict=True)] == [1.0] * 6
    assert known(code) == routing.queues() and len(small_splits().test) == 12
