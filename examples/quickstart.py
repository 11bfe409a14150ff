"""The quickstart: 12 questions, a reward of 1 when the answer states the year, one call to `evolve`.

`run` and `propose` stand in for model calls so that this runs anywhere in about a second: the "model" gives the
year only when its instructions ask for one, and the "reflection" suggests asking for it. Swap in your own agent:
`run(skill, task)` returns its answer with `skill` in its prompt, `propose(skill, task, output, reward)` returns
an edit of the skill (a rule, in plain text). With 12 tasks the validation split holds 3, too few for any change
to pass the acceptance test on its own, so the gate draws evidence from the training tasks too (the run's
protocol says so); the 3 test tasks are only reported.

    python examples/quickstart.py
"""

from __future__ import annotations

import shutil
import tempfile

from agentgrad import Budget, Result, Task, evolve

EVENTS = {
    "the Berlin Wall fall": 1989, "the first Moon landing happen": 1969, "the Titanic sink": 1912,
    "the Eiffel Tower open": 1889, "the World Wide Web go public": 1991, "Sputnik launch": 1957,
    "the Wright brothers first fly": 1903, "the euro notes enter circulation": 2002,
    "the Panama Canal open": 1914, "the first iPhone go on sale": 2007, "Apollo 13 launch": 1970,
    "the Channel Tunnel open": 1994,
}
TASKS = [Task(f"q{i:02d}", f"When did {event}?", expected=str(year)) for i, (event, year) in enumerate(EVENTS.items())]


def run(skill: str, task: Task) -> str:
    """A stand-in for a model call: it states the year only when its instructions ask for one."""
    event = task.input.removeprefix("When did ").rstrip("?")
    return f"{event}: in {task.expected}." if "year" in skill.lower() else f"{event}: a long time ago."


def reward(task: Task, output: str) -> float:
    """1 when the answer states the year."""
    return 1.0 if str(task.expected) in output else 0.0


def propose(skill: str, task: Task, output: str | None, score: float) -> str:
    """A stand-in for a reflection call on a failed answer: one rule to add to the skill."""
    return "Always state the year in your answer."


def main(*, asynchronous: bool = True, store: str | None = None) -> Result:
    """Evolve the empty skill on the 12 questions within 60 calls of `run`."""
    return evolve(TASKS, reward, run=run, propose=propose, budget=Budget(calls=60), workers=4,
                  asynchronous=asynchronous, store=store)


if __name__ == "__main__":
    folder = tempfile.mkdtemp(prefix="agentgrad-quickstart-")
    try:
        result = main(store=folder)
        print(result.summary())
        print(result.rendered)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
