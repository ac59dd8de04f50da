# Enroot's own code that reads $ENROOT_CONFIG_PATH/.credentials, copied verbatim from NVIDIA/enroot
# v4.1.2 (commit bd51f53b6fa954805ae3e1985c5dc7594ff66d05, the release fmcluster's node images bake:
# fmcluster.node.bootstrap.ENROOT_COMMIT), so that tests/kits/test_reference_image_kits.py holds the
# credentials file the Slurm kit's jobs write to what Enroot really does with it:
# - docker::_parse_uri (src/docker.sh): an image URI's user, registry, image and tag; without a user
#   in the URI, the login of the first `machine REGISTRY login USER` line of the file;
# - the test of docker::_authenticate (src/docker.sh) that chooses the file's credentials for that
#   user and registry (one line, verbatim, in a function of the tests': fmcluster_uses_file);
# - common::evalnetrc (src/common.sh): the file as curl reads it (--netrc-file), each password
#   that starts with `$` run as a command.
# Each block between `# >>> FILE` and `# <<<` must appear verbatim in FILE at that commit (the test
# checks it where a snapshot of NVIDIA/enroot is at hand).
#
# Copyright (c) 2018-2025, NVIDIA CORPORATION. All rights reserved.
# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# shellcheck shell=bash disable=SC2016,SC2034

common::err() {  # the tests': enroot's logs the message and exits 1
    printf 'ERROR: %s\n' "$1" >&2
    exit 1
}

# >>> src/common.sh
common::evalnetrc() {
    local -r file="$1"

    [ ! -f "${file}" ] && return

    awk '{
        if (NF >= 6 && $6 ~ "^\\$") {
            for(i=1; i<6; i++) printf "%s ", $i
            for(i=1; i<6; i++) sub("^["FS"]*[^"FS"]+["FS"]+", "", $0)
            system("stty sane; echo "$0)
        } else
            print
    }' "${file}"
}
# <<<

# >>> src/docker.sh
docker::_parse_uri() {
    local -r uri="$1"
    local -r reg_user="[[:alnum:]_.!~*\'()%\;:\&=+$,-@]+"
    local -r reg_image="[[:lower:][:digit:]/._-]+"
    local -r reg_tag="[[:alnum:]._:-]+"
    local -r reg_digest="sha256:[[:alnum:]]+"
    local user= registry= image= tag=

    # Try Docker standard syntax with registry: docker://[USER@]REGISTRY/IMAGE[@DIGEST|:TAG]
    # Registry must be FQDN (contains ".") or have port (contains ":"), otherwise it's a Docker Hub namespace
    if [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/#]+)/(${reg_image}):(${reg_tag})@(${reg_digest})$ ]]; then
        local match_registry="${BASH_REMATCH[3]}"
        local match_image="${BASH_REMATCH[4]}"
        user="${BASH_REMATCH[2]}"
        # Ignore tag, use digest
        tag="${BASH_REMATCH[6]}"
        if [[ "${match_registry}" =~ \.|: ]]; then
            # docker://[USER@]REGISTRY/IMAGE:TAG@DIGEST
            registry="${match_registry}"
            image="${match_image}"
        else
            # docker://[USER@]NAMESPACE/IMAGE:TAG@DIGEST
            registry="registry-1.docker.io"
            image="${match_registry}/${match_image}"
        fi
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/#]+)/(${reg_image})@(${reg_digest})$ ]]; then
        local match_registry="${BASH_REMATCH[3]}"
        local match_image="${BASH_REMATCH[4]}"
        user="${BASH_REMATCH[2]}"
        tag="${BASH_REMATCH[5]}"
        if [[ "${match_registry}" =~ \.|: ]]; then
            # docker://[USER@]REGISTRY/IMAGE@DIGEST
            registry="${match_registry}"
            image="${match_image}"
        else
            # docker://[USER@]NAMESPACE/IMAGE@DIGEST
            registry="registry-1.docker.io"
            image="${match_registry}/${match_image}"
        fi
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/#]+)/(${reg_image})(:(${reg_tag}))?$ ]]; then
        local match_registry="${BASH_REMATCH[3]}"
        local match_image="${BASH_REMATCH[4]}"
        user="${BASH_REMATCH[2]}"
        tag="${BASH_REMATCH[6]}"
        if [[ "${match_registry}" =~ \.|: ]]; then
            # docker://[USER@]REGISTRY/IMAGE[:TAG]
            registry="${match_registry}"
            image="${match_image}"
        else
            # docker://[USER@]NAMESPACE/IMAGE[:TAG]
            registry="registry-1.docker.io"
            image="${match_registry}/${match_image}"
        fi
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/@#:]+):(${reg_tag})@(${reg_digest})$ ]]; then
        # docker://[USER@]IMAGE:TAG@DIGEST
        user="${BASH_REMATCH[2]}"
        registry="registry-1.docker.io"
        image="library/${BASH_REMATCH[3]}"
        # Ignore tag, use digest
        tag="${BASH_REMATCH[5]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/@#:]+)@(${reg_digest})$ ]]; then
        # docker://[USER@]IMAGE@DIGEST
        user="${BASH_REMATCH[2]}"
        registry="registry-1.docker.io"
        image="library/${BASH_REMATCH[3]}"
        tag="${BASH_REMATCH[4]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/@#:]+)(:(${reg_tag}))?$ ]]; then
        # docker://[USER@]IMAGE[:TAG]
        user="${BASH_REMATCH[2]}"
        registry="registry-1.docker.io"
        image="library/${BASH_REMATCH[3]}"
        tag="${BASH_REMATCH[5]}"
    # enroot format with '#' as the separator between registry and image
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^#/@]+)#(${reg_image}):(${reg_tag})@(${reg_digest})$ ]]; then
        # docker://[USER@]REGISTRY#IMAGE:TAG@DIGEST
        user="${BASH_REMATCH[2]}"
        registry="${BASH_REMATCH[3]}"
        image="${BASH_REMATCH[4]}"
        # Ignore tag, use digest
        tag="${BASH_REMATCH[6]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^#/@]+)#(${reg_image})@(${reg_digest})$ ]]; then
        # docker://[USER@]REGISTRY#IMAGE@DIGEST
        user="${BASH_REMATCH[2]}"
        registry="${BASH_REMATCH[3]}"
        image="${BASH_REMATCH[4]}"
        tag="${BASH_REMATCH[5]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^#/@]+)#(${reg_image})(:(${reg_tag}))?$ ]]; then
        # docker://[USER@]REGISTRY#IMAGE[:TAG]
        user="${BASH_REMATCH[2]}"
        registry="${BASH_REMATCH[3]}"
        image="${BASH_REMATCH[4]}"
        tag="${BASH_REMATCH[6]}"
    else
        common::err "Invalid image reference: ${uri}"
    fi

    if [ -z "${tag}" ]; then
        tag="latest"
    fi

    # Try to infer the user from the credential file.
    if [ -s "${creds_file}" ] && [ -n "${registry}" ] && [ -z "${user}" ]; then
        user="$(awk "/^[[:space:]]*machine[[:space:]]+${registry%:*}[[:space:]]+login[[:space:]]+.+/ { print \$4; exit }" "${creds_file}")"
    fi

    printf "%s\n%s\n%s\n%s\n" "${user}" "${registry}" "${image}" "${tag}"
}
# <<<

fmcluster_uses_file() {  # USER REGISTRY: whether docker::_authenticate passes the file to curl
    local -r user="$1" registry="$2"
# >>> src/docker.sh
        if grep -qs "^machine[[:space:]]\+${registry%:*}[[:space:]]\+login[[:space:]]\+${user}[[:space:]]" "${creds_file}"; then
# <<<
            return 0
        fi
    return 1
}
