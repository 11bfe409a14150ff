"""The agentgrad service: a FastAPI app (``pip install 'agentgrad[service]'``, ``agentgrad serve``) that starts runs
from the CLI's configuration files as durable jobs executed in worker processes, serves their store and event log
over a JSON API and Server-Sent Events, and hosts the dashboard (`agentgrad.ui`).

Modules: `settings` (what the service is started with), `auth` (bearer tokens, hashed at rest), `jobs` (the jobs
table), `workers` and `supervisor` (worker processes and keeping jobs alive across restarts), `reading` and
`rendering` (what a run's store says), `streaming` (the live event stream), `errors` (JSON errors), `models` (the
request and response bodies), `routes` (the API by concern), `app` (the factory) and `server` (uvicorn).

`import agentgrad` never imports this package; FastAPI is imported only by the modules that need it.
"""
