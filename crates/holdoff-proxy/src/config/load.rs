//! Reading configuration files: JSON with comments, or YAML.
