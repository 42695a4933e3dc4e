#!/usr/bin/env bash
# Makes a development PKI for rocetune's mutual TLS with openssl: a CA, the
# controller's certificate, one certificate per agent (CN = host id) and one
# per operator (CN = the operator's name), plus a roles file for the
# controller. For development and tests only: keys are unencrypted and the CA
# key sits next to the certificates.
#
# Usage: make-dev-pki.sh -o DIR [-n NAME]... [-a HOST_ID]... [-u NAME:ROLE]...
#                        [-x NAME:ROLE]... [-d DAYS] [-c CA_NAME]
#   -o DIR        output directory (created; an existing CA there is reused)
#   -n NAME       extra DNS name or IP address of the controller (localhost,
#                 127.0.0.1 and ::1 are always included)
#   -a HOST_ID    an agent certificate agent-HOST_ID.{pem,key} (role agent)
#   -u NAME:ROLE  an operator certificate user-NAME.{pem,key}; ROLE is viewer,
#                 operator or approver (repeat -u with the same NAME for more
#                 than one role: the certificate is made once)
#   -x NAME:ROLE  like -u, but the certificate expired in 2020 (to test refusal)
#   -d DAYS       validity of new certificates (default 825)
#   -c CA_NAME    the CA's common name (default "rocetune dev CA")
# Files: ca.pem ca.key, controller.pem controller.key, agent-*.pem/key,
# user-*.pem/key, roles.textproto (the controller's --roles_file).
set -euo pipefail

out="" days=825 ca_name="rocetune dev CA"
names=() agents=() users=() expired=()
while getopts "o:n:a:u:x:d:c:h" opt; do
  case "$opt" in
    o) out="$OPTARG" ;;
    n) names+=("$OPTARG") ;;
    a) agents+=("$OPTARG") ;;
    u) users+=("$OPTARG") ;;
    x) expired+=("$OPTARG") ;;
    d) days="$OPTARG" ;;
    c) ca_name="$OPTARG" ;;
    h) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-dev-pki.sh: see -h" >&2; exit 2 ;;
  esac
done
if [ -z "$out" ]; then
  echo "make-dev-pki.sh: -o DIR is required (see -h)" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "make-dev-pki.sh: openssl not found" >&2; exit 1; }
valid_name() { [[ "$1" =~ ^[A-Za-z0-9._@-]{1,64}$ ]]; }
valid_role() { [[ "$1" == viewer || "$1" == operator || "$1" == approver ]]; }
for u in "${users[@]}" "${expired[@]}"; do
  if [[ "$u" != *:* ]] || ! valid_name "${u%%:*}" || ! valid_role "${u#*:}"; then
    echo "make-dev-pki.sh: \"$u\": want NAME:ROLE with ROLE viewer, operator or approver" >&2
    exit 2
  fi
done
for a in "${agents[@]}"; do
  valid_name "$a" || { echo "make-dev-pki.sh: bad host id \"$a\"" >&2; exit 2; }
done

mkdir -p "$out"
cd "$out"
umask 077

if [ ! -f ca.pem ] || [ ! -f ca.key ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.pem -days "$days" -subj "/CN=$ca_name" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

# issue NAME_PREFIX CN EXTENSIONS [expired]
issue() {
  local file="$1" cn="$2" ext="$3" expired="${4:-}"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$file.key" \
    -out "$file.csr" -subj "/CN=$cn" 2>/dev/null
  printf '%s\n' "$ext" > "$file.ext"
  if [ -z "$expired" ]; then
    openssl x509 -req -in "$file.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
      -out "$file.pem" -days "$days" -sha256 -extfile "$file.ext" 2>/dev/null
  else
    # `openssl ca` is the tool that takes explicit start and end dates.
    local db
    db="$(mktemp -d)"
    : > "$db/index.txt"
    echo 1000 > "$db/serial"
    cat > "$db/ca.cnf" <<CNF
[ca]
default_ca = dev
[dev]
database = $db/index.txt
new_certs_dir = $db
serial = $db/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
CNF
    openssl ca -batch -notext -config "$db/ca.cnf" -keyfile ca.key -cert ca.pem \
      -in "$file.csr" -out "$file.pem" -startdate 20200101000000Z -enddate 20200102000000Z \
      -extfile "$file.ext" 2>/dev/null
    rm -rf "$db"
  fi
  rm -f "$file.csr" "$file.ext"
}

client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for n in "${names[@]}"; do
  if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then san="$san,IP:$n"; else san="$san,DNS:$n"; fi
done
issue controller rocetune-controller "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"

for a in "${agents[@]}"; do
  issue "agent-$a" "$a" "$client_ext"
done
declare -A made=()
for u in "${users[@]}"; do
  name="${u%%:*}"
  if [ -z "${made[$name]:-}" ]; then
    issue "user-$name" "$name" "$client_ext"
    made[$name]=1
  fi
done
for u in "${expired[@]}"; do
  name="${u%%:*}"
  issue "user-$name" "$name" "$client_ext" expired
done

{
  echo "# Made by make-dev-pki.sh: certificate identities (CN) and their roles."
  for role in viewer operator approver; do
    ids=()
    for u in "${users[@]}" "${expired[@]}"; do
      if [ "${u#*:}" = "$role" ]; then ids+=("${u%%:*}"); fi
    done
    if [ ${#ids[@]} -gt 0 ]; then
      echo "binding {"
      echo "  role: \"$role\""
      for i in "${ids[@]}"; do echo "  identity: \"$i\""; done
      echo "}"
    fi
  done
  if [ ${#agents[@]} -gt 0 ]; then
    echo "binding {"
    echo "  role: \"agent\""
    for a in "${agents[@]}"; do echo "  identity: \"$a\""; done
    echo "}"
  fi
} > roles.textproto
chmod 644 ./*.pem roles.textproto
echo "make-dev-pki.sh: wrote $(pwd)"
