//! Shared helpers for belfry integration tests.
