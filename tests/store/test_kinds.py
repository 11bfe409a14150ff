"""Event kinds are one typed enum whose members read as their plain names everywhere a name is read."""

from __future__ import annotations

import json
from pathlib import Path

from agentgrad.store.events import EventLog
from agentgrad.store.kinds import EventKind, kind_name


def test_a_kind_equals_formats_and_serialises_as_its_plain_name() -> None:
    kind = EventKind.STEP_DONE
    assert kind == "step_done" and str(kind) == "step_done" and f"{kind}" == "step_done"
    assert json.dumps({"kind": kind}) == '{"kind": "step_done"}'
    assert {"step_done": 1}[kind] == 1 and kind_name(kind) == "step_done" and kind_name("other") == "other"


def test_the_log_stores_and_filters_typed_kinds_as_plain_names(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append(EventKind.DECISION, {"n": 1})
    log.append_many([(EventKind.COMMIT, {"n": 2}), (EventKind.STEP_DONE, {"n": 3})])
    assert [(e.kind, e.payload["n"]) for e in log.read([EventKind.COMMIT, "decision"])] == [("decision", 1),
                                                                                          ("commit", 2)]
    assert type(log.read()[0].kind) is str
    log.close()


def test_every_kind_the_runtime_writes_is_a_member() -> None:
    import re

    source = "\n".join(p.read_text() for p in Path(__file__).parents[2].joinpath("src/agentgrad/runtime").glob("*.py"))
    assert not re.search(r'\b(emit|log_soon|tell)\("', source), "an event kind written as a plain string"
    used = set(re.findall(r"EventKind\.([A-Z_]+)", source))
    assert used <= set(EventKind.__members__)
