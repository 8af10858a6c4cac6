//! The built-in target server behind `volley serve` and `volley demo`.
