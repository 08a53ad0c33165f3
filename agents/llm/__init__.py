"""Model access. `base` is what the engine and compaction talk to (the
`ChatModel` protocol and the `Delta`s it streams); `openai_model` and `demo`
are the two models behind it; `config` chooses which model each agent gets.
"""
