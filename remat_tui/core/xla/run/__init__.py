"""The run subpackage (issue 44): see the modules below."""
