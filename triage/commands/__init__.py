"""One module per CLI command; each stays thin (parse options, call the library, emit the report)."""
