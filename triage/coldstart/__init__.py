"""`triage coldstart`: time to ready and to the first token, broken down by start-up phase."""
