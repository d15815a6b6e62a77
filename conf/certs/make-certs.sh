#!/usr/bin/env bash
# Test certificates for conf/tls.conf: a private CA, a server certificate for localhost / 127.0.0.1 / ::1, a
# client certificate, and a route certificate (server and client use: a route both accepts and dials, and mutual
# TLS between servers checks both ends), valid for ten years.  FOR TESTS ONLY: the private keys are public in this repository.
#
#   bash conf/certs/make-certs.sh            # (re)creates the files next to this script
#
# Needs the openssl command line tool.
set -euo pipefail
cd "$(dirname "$0")"
days=3650
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=Skiff Test CA" \
  -keyout ca-key.pem -out ca.pem 2>/dev/null
cat > server.ext <<'EXT'
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
extendedKeyUsage = serverAuth
EXT
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server-key.pem -out server.csr 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" \
  -extfile server.ext -out server-cert.pem 2>/dev/null
cat > client.ext <<'EXT'
extendedKeyUsage = clientAuth
EXT
openssl req -newkey rsa:2048 -nodes -subj "/CN=skiff-test-client" -keyout client-key.pem -out client.csr 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" \
  -extfile client.ext -out client-cert.pem 2>/dev/null
cat > route.ext <<'EXT'
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
extendedKeyUsage = serverAuth, clientAuth
EXT
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout route-key.pem -out route.csr 2>/dev/null
openssl x509 -req -in route.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" \
  -extfile route.ext -out route-cert.pem 2>/dev/null
rm -f server.csr client.csr route.csr server.ext client.ext route.ext ca.srl
echo "wrote $(pwd)/{ca,server-cert,server-key,client-cert,client-key,route-cert,route-key}.pem"
