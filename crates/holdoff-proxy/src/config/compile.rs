//! Raw configuration → validated → compiled.
