"""Security at the door: tokens, roles and TLS (CONTRACT section 10).

``principals`` reads the ``--auth-tokens`` file, ``auth`` is the interceptor that checks
every call's token and role, ``guard`` checks the options at start (TLS files, exposure)
and reloads on SIGHUP. Depends on nothing else in ``server`` but ``server.rpc``'s error
mapping.
"""
