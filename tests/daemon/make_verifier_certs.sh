#!/usr/bin/env bash
# Makes the certificates client_cert_verifier_test checks, with openssl, in DIR:
#   ca.pem, other-ca.pem          two unrelated CAs
#   int.pem                       an intermediate CA under ca
#   good.pem                      client certificate from ca (clientAuth)
#   via-int.pem                   client certificate from int
#   other.pem                     client certificate from other-ca
#   expired.pem                   from ca, valid 2020-01-01 to 2020-01-02
#   future.pem                    from ca, valid from 2099-01-01
#   server-only.pem               from ca, extendedKeyUsage serverAuth only
# Usage: make_verifier_certs.sh DIR
set -euo pipefail
dir="$1"
mkdir -p "$dir"
cd "$dir"

ca() {  # NAME CN [ISSUER]: a CA certificate, self-signed or issued by ISSUER
  local name="$1" cn="$2" issuer="${3:-}"
  local ext="basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign"
  if [ -z "$issuer" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name.key" \
      -out "$name.pem" -days 30 -subj "/CN=$cn" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  else
    printf '%s\n' "$ext" > "$name.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name.key" \
      -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA "$issuer.pem" -CAkey "$issuer.key" -CAcreateserial \
      -out "$name.pem" -days 30 -sha256 -extfile "$name.ext" 2>/dev/null
  fi
}

# leaf NAME CN ISSUER EKU [START END]: an end-entity certificate
leaf() {
  local name="$1" cn="$2" issuer="$3" eku="$4" start="${5:-}" end="${6:-}"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name.key" \
    -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\n' \
    "$eku" > "$name.ext"
  if [ -z "$start" ]; then
    openssl x509 -req -in "$name.csr" -CA "$issuer.pem" -CAkey "$issuer.key" -CAcreateserial \
      -out "$name.pem" -days 30 -sha256 -extfile "$name.ext" 2>/dev/null
    return
  fi
  # `openssl ca` takes explicit start and end dates.
  local db
  db="$(mktemp -d)"
  : > "$db/index.txt"
  echo 1000 > "$db/serial"
  cat > "$db/ca.cnf" <<CNF
[ca]
default_ca = t
[t]
database = $db/index.txt
new_certs_dir = $db
serial = $db/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
CNF
  openssl ca -batch -notext -config "$db/ca.cnf" -keyfile "$issuer.key" -cert "$issuer.pem" \
    -in "$name.csr" -out "$name.pem" -startdate "$start" -enddate "$end" \
    -extfile "$name.ext" 2>/dev/null
  rm -rf "$db"
}

ca ca "test CA"
ca other-ca "other CA"
ca int "test intermediate" ca
leaf good good-client ca clientAuth
leaf via-int int-client int clientAuth
leaf other other-client other-ca clientAuth
leaf expired old-client ca clientAuth 20200101000000Z 20200102000000Z
leaf future new-client ca clientAuth 20990101000000Z 20991231000000Z
leaf server-only a-server ca serverAuth
rm -f ./*.csr ./*.ext ./*.srl
