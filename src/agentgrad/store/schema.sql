-- agentgrad run store, schema version 1. One database per run directory; JSON or SQL only, never pickle.
-- Versions carry a global, gap-free sequence number `seq` (commit order across all artifacts); the git mirror
-- replays versions in that order.

CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,              -- sha256 of the UTF-8 text (agentgrad.core.artifact.content_hash)
    text TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS artifacts (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    layer TEXT NOT NULL CHECK (layer IN ('L0', 'L1', 'L2')),
    created REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS diffs (
    id TEXT PRIMARY KEY,
    artifact_id TEXT NOT NULL REFERENCES artifacts(id),
    body TEXT NOT NULL,                 -- Diff.to_dict() as canonical JSON
    created REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS versions (
    seq INTEGER PRIMARY KEY,            -- global commit order
    artifact_id TEXT NOT NULL REFERENCES artifacts(id),
    number INTEGER NOT NULL CHECK (number >= 0),
    hash TEXT NOT NULL REFERENCES blobs(hash),
    diff_id TEXT UNIQUE REFERENCES diffs(id),   -- NULL for version 0
    created REAL NOT NULL,
    UNIQUE (artifact_id, number)
);
CREATE INDEX IF NOT EXISTS versions_by_artifact_seq ON versions (artifact_id, seq);

CREATE TABLE IF NOT EXISTS heads (
    artifact_id TEXT NOT NULL REFERENCES artifacts(id),
    branch TEXT NOT NULL CHECK (branch IN ('dev', 'stable')),
    number INTEGER NOT NULL,
    PRIMARY KEY (artifact_id, branch),
    FOREIGN KEY (artifact_id, number) REFERENCES versions(artifact_id, number)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS evidence (
    diff_id TEXT PRIMARY KEY REFERENCES diffs(id),
    base_version INTEGER,
    full INTEGER NOT NULL,
    cost REAL NOT NULL,
    tokens INTEGER NOT NULL,
    traces TEXT NOT NULL,               -- JSON list of strings
    n_rows INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS evidence_rows (
    diff_id TEXT NOT NULL,
    idx INTEGER NOT NULL,               -- row order inside the evidence
    task_id TEXT NOT NULL,
    base REAL NOT NULL,
    candidate REAL NOT NULL,
    PRIMARY KEY (diff_id, idx)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    diff_id TEXT NOT NULL REFERENCES diffs(id),
    artifact_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    stage TEXT NOT NULL,
    reason TEXT NOT NULL,
    numbers TEXT NOT NULL,              -- JSON object
    fingerprint TEXT NOT NULL,
    parts TEXT NOT NULL,                -- JSON list of diff ids
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_by_diff ON decisions (diff_id);
CREATE INDEX IF NOT EXISTS decisions_by_artifact ON decisions (artifact_id, outcome);

-- Every change of the stable branch (a promotion, or a new artifact entering at version 0), for the mirror.
CREATE TABLE IF NOT EXISTS stable_log (
    seq INTEGER PRIMARY KEY,
    upto INTEGER NOT NULL,              -- the last version seq committed when stable changed
    state TEXT NOT NULL,                -- JSON {artifact_id: stable version number}
    reason TEXT NOT NULL,
    created REAL NOT NULL,
    git_sha TEXT                        -- the git commit `stable` points to, once mirrored
);

-- version seq -> git commit sha on `dev`; contiguous from the first version.
CREATE TABLE IF NOT EXISTS mirror (
    seq INTEGER PRIMARY KEY REFERENCES versions(seq),
    sha TEXT NOT NULL
);

-- The run's event log (`EventLog`, `SQLiteStore.journal`): every dispatch, result, proposal, decision and commit,
-- in order; written in the same transactions as the store writes they are about.
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_kind ON events(kind, seq);
-- A call id is dispatched once: a second writer or a bug that reused one is refused, not silently double-counted.
CREATE UNIQUE INDEX IF NOT EXISTS events_call ON events(json_extract(payload, '$.call')) WHERE kind = 'dispatch';

-- Named JSON documents of the run: its configuration, the latest checkpoint, the wall time noted while it ran.
CREATE TABLE IF NOT EXISTS run_state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
