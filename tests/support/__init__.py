"""Helpers the tests share: fakes, servers run for a test, builders of test files and models."""
