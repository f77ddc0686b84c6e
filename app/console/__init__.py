"""The admin console: server-rendered pages under ``/console`` (Jinja templates, htmx for
progressive enhancement), signed in with an admin API key. See docs/CONSOLE.md."""
