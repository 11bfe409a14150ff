"""The dashboard, served by the service's app (`agentgrad.service`): server-rendered pages (Jinja2 templates in
``templates/``) and a small script layer (``static/``), shipped in the package so nothing is fetched from the
network. `pages.mount` adds them to an app."""
