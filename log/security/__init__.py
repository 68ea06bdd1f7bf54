"""Security: TLS contexts, SASL mechanisms as sans-IO exchanges, principals.

tls.py builds `ssl.SSLContext`s from a node's `ssl.*` settings; jaas.py reads
`sasl.jaas.config`; plain.py and scram.py are the server (and client) sides of the SASL
mechanisms, bytes in, bytes out; authenticator.py is the per-connection SASL state machine
(SaslHandshake, SaslAuthenticate, which requests may pass before authentication);
credentials.py holds the users a broker knows. Only tls.py touches files (the PEMs).
"""
