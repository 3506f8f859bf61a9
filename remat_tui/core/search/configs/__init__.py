"""The configs subpackage (issue 44): see the modules below."""
