"""Portal pages beyond the chat: settings (keys, agents, tools, runners, providers), cron jobs, inbox.

Pages read through the apps' selectors and models; every write is made by the browser through the REST
API (static/js/portal.js), so permissions and validation live in one place.
"""
