//! OpenAI-compatible chat completions client (filled in by its own change).
