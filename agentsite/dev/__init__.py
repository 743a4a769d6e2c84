"""Development and test helpers shipped with the server, never used by it in production:
`fake_llm`, the scripted OpenAI-compatible model behind `manage.py fake_llm` (demos, tests, benchmarks)."""
