"""Generation model backends, one module each, registered by `module_name`."""
