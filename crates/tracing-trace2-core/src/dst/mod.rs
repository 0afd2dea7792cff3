//! Destinations: where a target's lines are written.
