"""The runtime subpackage (issue 44): see the modules below."""
