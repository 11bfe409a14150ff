"""The CLI's commands, grouped by concern: running a run, inspecting one, the library, the report."""
