"""Provides what the user asked for, resolved once: the Config (outer policy,
site overrides, device; config.py), policy specs and the jax policies they
build (policies.py), devices and TPU topologies (devices.py) and the one
spelling of a device's label (`device_label_from`), loading a target
file and building its example arguments (loading.py), errors in the user's
code said as such (usererrors.py), and JAX's own caches emptied for a caller
that traces many configurations (caches.py).

The lowest stage: it imports only jaxcompat and the core's shared modules.
"""
