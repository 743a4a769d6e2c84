"""The portal's pages, one module per area: chats, settings (keys, agents, providers), cron jobs and inbox."""
