"""The git mirror, read back with dulwich (and the git binary if present): one commit per version, stories in the
messages, `stable` following promotions, catching up after a reopen."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dulwich.objects import Commit, ObjectID
from dulwich.refs import Ref
from dulwich.repo import Repo

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.store.sqlite import SQLiteStore

STYLE, SYSTEM = "skills/style", "prompts/system/main"
EVIDENCE = Evidence.paired({"t1": 0.0, "t2": 0.5}, {"t1": 1.0, "t2": 0.5})


class Tick:
    """A deterministic clock: 1000.0, 1001.0, ..."""

    def __init__(self) -> None:
        self.now = 999.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def accept(diff: Diff) -> Decision:
    return Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "P(better) above 0.95",
                    {"p": 0.99, "wins": 7, "losses": 1, "margin": 0.125})


def add_rule(store: SQLiteStore, artifact_id: str, rule: str) -> Diff:
    diff = Diff(artifact_id, store.head(artifact_id).number, (Op.add("rule", f"- {rule}"),), author="w1",
                rationale=f"add {rule}")
    store.commit(diff, EVIDENCE, accept(diff))
    return diff


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    return tmp_path / "library.git"


def branch_sha(path: Path, branch: str) -> ObjectID | None:
    with Repo(str(path)) as repo:
        return repo.refs.as_dict().get(Ref(f"refs/heads/{branch}".encode()))


def log(path: Path, branch: str = "dev") -> list[Commit]:
    """The commits on `branch`, oldest first, read with dulwich's walker."""
    with Repo(str(path)) as repo:
        tip = repo.refs[Ref(f"refs/heads/{branch}".encode())]
        return [entry.commit for entry in reversed(list(repo.get_walker(include=[tip])))]


def files(path: Path, commit: Commit) -> dict[str, str]:
    """Every file in the commit's tree, by path, decoded."""
    with Repo(str(path)) as repo:
        store = repo.object_store
        return {e.path.decode(): repo[e.sha].as_raw_string().decode()
                for e in store.iter_tree_contents(commit.tree) if e.path is not None and e.sha is not None}


def title(commit: Commit) -> str:
    return str(commit.message.decode()).splitlines()[0]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path, clock=Tick()) as opened:
        opened.add_artifact(Artifact(STYLE, Kind.SKILL, "# Style\n"))
        opened.add_artifact(Artifact(SYSTEM, Kind.PROMPT, "You are careful.\n"))
        yield opened


def test_each_version_is_one_dev_commit_holding_every_artifact(store: SQLiteStore, repo_path: Path) -> None:
    diffs = [add_rule(store, STYLE, "be brief"), add_rule(store, SYSTEM, "cite sources"),
             add_rule(store, STYLE, "use units")]
    assert store.git_lag() == 5
    assert store.sync_git() == 5 and store.git_lag() == 0
    commits = log(repo_path)
    states = [{STYLE: "# Style\n"}, {SYSTEM: "You are careful.\n"}, {STYLE: "# Style\n- be brief\n"},
              {SYSTEM: "You are careful.\n- cite sources\n"}, {STYLE: "# Style\n- be brief\n- use units\n"}]
    expected: dict[str, str] = {}
    for index, (commit, change) in enumerate(zip(commits, states, strict=True)):
        expected = {**expected, **change}
        assert files(repo_path, commit) == expected
        assert commit.author_time == commit.commit_time == 1000 + index
        assert commit.parents == ([commits[index - 1].id] if index else [])
    assert [title(c) for c in commits] == [
        f"{STYLE} v0: initial text", f"{SYSTEM} v0: initial text", f"{STYLE} v1: add be brief",
        f"{SYSTEM} v1: add cite sources", f"{STYLE} v2: add use units"]
    story = commits[-1].message.decode()
    for line in ("stage: accept", "reason: P(better) above 0.95", "numbers: losses=1, margin=0.125, p=0.99, wins=7",
                 f"diff: {diffs[-1].id}", "author: w1"):
        assert line in story.splitlines()
    assert commits[-1].author.startswith(b"w1 <")


def test_the_mirror_lags_until_synced_and_syncing_twice_writes_nothing(store: SQLiteStore, repo_path: Path) -> None:
    store.sync_git()
    tip = branch_sha(repo_path, "dev")
    add_rule(store, STYLE, "one")
    add_rule(store, STYLE, "two")
    assert store.git_lag() == 2 and branch_sha(repo_path, "dev") == tip
    assert store.sync_git() == 2
    assert store.sync_git() == 0
    commits = log(repo_path)
    assert len(commits) == 4
    assert files(repo_path, commits[-1]) == {STYLE: "# Style\n- one\n- two\n", SYSTEM: "You are careful.\n"}


def test_syncing_in_small_batches_gives_the_same_history(tmp_path: Path) -> None:
    logs = []
    for name, batch in (("whole", 2000), ("pieces", 2)):
        with SQLiteStore(tmp_path / name, clock=Tick()) as store:
            store.add_artifact(Artifact(STYLE, Kind.SKILL, "# Style\n"))
            store.add_artifact(Artifact(SYSTEM, Kind.PROMPT, ""))
            for rule in ("a", "b", "c"):
                add_rule(store, STYLE, rule)
            assert store.sync_git(batch=batch) == 5
        logs.append([(c.id, c.tree) for c in log(tmp_path / name / "library.git")])
    assert len(logs[0]) == 5 and logs[0] == logs[1]


def test_a_reopened_store_continues_mirroring_where_it_stopped(tmp_path: Path, repo_path: Path) -> None:
    clock = Tick()
    with SQLiteStore(tmp_path, clock=clock) as first:
        first.add_artifact(Artifact(STYLE, Kind.SKILL, "# Style\n"))
        add_rule(first, STYLE, "one")
    assert len(log(repo_path)) == 2  # close() synced
    with SQLiteStore(tmp_path, git=False, clock=clock) as offline:
        add_rule(offline, STYLE, "two")
        add_rule(offline, STYLE, "three")
    assert len(log(repo_path)) == 2
    with SQLiteStore(tmp_path, clock=clock) as reopened:
        assert reopened.git_lag() == 2
        assert reopened.sync_git() == 2
        commits = log(repo_path)
        assert [title(c) for c in commits] == [f"{STYLE} v0: initial text", f"{STYLE} v1: add one",
                                               f"{STYLE} v2: add two", f"{STYLE} v3: add three"]
        assert len({c.id for c in commits}) == 4
        assert files(repo_path, commits[-1]) == {STYLE: reopened.head(STYLE).text}


def test_stable_moves_to_the_commit_of_the_promoted_state(store: SQLiteStore, repo_path: Path) -> None:
    store.sync_git()
    assert branch_sha(repo_path, "stable") == branch_sha(repo_path, "dev")  # all at v0
    add_rule(store, STYLE, "one")
    add_rule(store, SYSTEM, "two")
    store.promote()
    assert branch_sha(repo_path, "stable") == branch_sha(repo_path, "dev")
    add_rule(store, STYLE, "three")
    add_rule(store, SYSTEM, "four")
    assert store.promote([SYSTEM]) == {SYSTEM: 2}
    stable = log(repo_path, "stable")
    assert title(stable[-1]) == f"stable: promote {SYSTEM} v2"
    assert stable[-1].parents == [stable[-2].id] and stable[-2].id == log(repo_path)[-3].id
    assert files(repo_path, stable[-1]) == {STYLE: store.head(STYLE, "stable").text,
                                            SYSTEM: store.head(SYSTEM).text}
    assert store.head(STYLE, "stable").number == 1


def test_an_artifact_added_later_enters_stable_at_version_zero(store: SQLiteStore, repo_path: Path) -> None:
    add_rule(store, STYLE, "unpromoted")
    store.add_artifact(Artifact("memory/notes", Kind.MEMORY, "- note\n"))
    store.sync_git()
    stable_files = files(repo_path, log(repo_path, "stable")[-1])
    assert stable_files == {STYLE: "# Style\n", SYSTEM: "You are careful.\n", "memory/notes": "- note\n"}


def test_revert_is_mirrored_with_its_reason(store: SQLiteStore, repo_path: Path) -> None:
    diff = add_rule(store, STYLE, "ramble")
    store.revert(STYLE, reason="held-out score fell")
    store.sync_git()
    last = log(repo_path)[-1]
    assert title(last) == f"{STYLE} v2: revert {diff.id}: held-out score fell"
    assert "stage: revert" in last.message.decode()
    assert files(repo_path, last)[STYLE] == "# Style\n"


def test_the_same_history_gives_the_same_git_commits(tmp_path: Path) -> None:
    tips = []
    for name in ("one", "two"):
        with SQLiteStore(tmp_path / name, clock=Tick()) as store:
            store.add_artifact(Artifact(STYLE, Kind.SKILL, "# Style\n"))
            add_rule(store, STYLE, "be brief")
        tips.append(branch_sha(tmp_path / name / "library.git", "dev"))
    assert tips[0] is not None and tips[0] == tips[1]


@pytest.mark.skipif(shutil.which("git") is None, reason="the git binary is not installed")
def test_git_log_shows_the_diff_lines_and_the_story(store: SQLiteStore, repo_path: Path) -> None:
    add_rule(store, STYLE, "cite sources")
    store.sync_git()
    shown = subprocess.run(["git", "--git-dir", str(repo_path), "log", "-p", "dev"], capture_output=True,
                           text=True, check=True).stdout
    assert f"{STYLE} v1: add cite sources" in shown
    assert "stage: accept" in shown and "numbers: losses=1, margin=0.125, p=0.99, wins=7" in shown
    assert "+- cite sources" in shown and f"+++ b/{STYLE}" in shown
    fsck = subprocess.run(["git", "--git-dir", str(repo_path), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_a_half_made_mirror_left_by_a_killed_process_is_rebuilt(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "library.git" / "branches").mkdir(parents=True)  # what a kill during creation leaves: no HEAD
    with SQLiteStore(run) as store:
        store.add_artifact(Artifact("skills/a", Kind.SKILL, "x"))
        assert store.sync_git() >= 1
    assert (run / "library.git" / "HEAD").exists()


def test_stale_ref_locks_left_by_a_killed_sync_do_not_break_the_next_session(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SQLiteStore(run) as store:
        store.add_artifact(Artifact("skills/a", Kind.SKILL, "x"))
    lock = run / "library.git" / "refs" / "heads" / "dev.lock"
    lock.write_text("0" * 40)
    with SQLiteStore(run) as store:
        diff = Diff("skills/a", 0, (Op.replace("text", "x", "y"),))
        store.commit(diff, Evidence.paired({"t": 0.0}, {"t": 1.0}),
                     Decision(diff.id, "skills/a", Outcome.ACCEPTED, "accept", "ok", {}))
    assert not lock.exists()
    with SQLiteStore(run) as store:
        assert store.git_lag() == 0


def _two_sessions(run: Path, before_second: Callable[[], None] = lambda: None,
                  before_commit: Callable[[], None] = lambda: None) -> None:
    """Session one adds an artifact; session two commits one diff (both with a fresh deterministic clock)."""
    with SQLiteStore(run, clock=Tick()) as store:
        store.add_artifact(Artifact("skills/a", Kind.SKILL, "x"))
    before_second()
    with SQLiteStore(run, clock=Tick()) as store:
        before_commit()
        diff = Diff("skills/a", 0, (Op.replace("text", "x", "y"),))
        store.commit(diff, Evidence.paired({"t": 0.0}, {"t": 1.0}),
                     Decision(diff.id, "skills/a", Outcome.ACCEPTED, "accept", "ok", {}))


@pytest.mark.parametrize("when", ["between_sessions", "while_open"])
def test_a_pack_half_landed_by_a_killed_sync_is_rewritten_by_the_next_write(tmp_path: Path, when: str) -> None:
    reference = tmp_path / "reference"
    _two_sessions(reference)
    pack_dir = reference / "library.git" / "objects" / "pack"
    first = {p.stem for p in pack_dir.glob("*.pack")}
    run = tmp_path / "run"

    def killed_while_indexing() -> None:
        """What kill -9 leaves after the pack is renamed in and before its index lands: the pack, the index lock."""
        target = run / "library.git" / "objects" / "pack"
        for name in first - {p.stem for p in target.glob("*.pack")}:
            shutil.copy(pack_dir / f"{name}.pack", target / f"{name}.pack")
            (target / f"{name}.idx.lock").write_bytes(b"")
        (target / "tmpk1ll3d.pack").write_bytes(b"PACK")

    if when == "between_sessions":  # cleared when the next session opens the mirror
        _two_sessions(run, before_second=killed_while_indexing)
    else:  # another writer died after this one opened the mirror: cleared when the write meets its lock
        _two_sessions(run, before_commit=killed_while_indexing)
    assert not list((run / "library.git" / "objects" / "pack").glob("*.lock"))
    with SQLiteStore(run) as store:
        assert store.git_lag() == 0
    assert [title(c) for c in log(run / "library.git")] == [title(c) for c in log(reference / "library.git")]
    fsck = subprocess.run(["git", "--git-dir", str(run / "library.git"), "fsck", "--strict"], capture_output=True,
                          text=True)
    assert fsck.returncode == 0, fsck.stderr
