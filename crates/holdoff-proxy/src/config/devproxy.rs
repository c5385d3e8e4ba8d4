//! Microsoft Dev Proxy configuration, imported.
