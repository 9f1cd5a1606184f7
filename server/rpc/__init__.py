"""The gRPC plumbing every service shares, free of any service's logic.

``handlers`` builds checked method handlers and the admission interceptor, ``errors`` maps
exceptions to statuses (CONTRACT section 5), ``convert`` is protobuf to domain objects and
back, ``wire_peek`` reads a request's topic from its bytes, ``reflection`` serves server
reflection. Imports no room of ``server``.
"""
