"""The API's routes, by concern: `runs` (jobs: start, list, cancel, resume, promote, export), `library` (what a
run's store holds), `events` (the live stream)."""
