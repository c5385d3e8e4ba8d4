//! The built-in presets.
