"""Example run configurations (TOML) for `analyse profile`."""
