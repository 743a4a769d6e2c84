"""Live sessions shared by several server processes (Postgres + Redis): see sessions.py."""
