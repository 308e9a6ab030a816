/* OpenSSH signatures (the SSHSIG format of `ssh-keygen -Y`, as git signs commits with
 * gpg.format ssh): sign a file with a private key, find who an allowed-signers file says made a
 * signature, verify it, and read the signer's key fingerprint and namespace out of a signature.
 *
 * No new dependency: OpenSSH's ssh-keygen (Debian's openssh-client, 8.2 or later) runs as a child
 * process with a clean argv (no shell), in a session of its own with no terminal and stdin from
 * /dev/null (or the signed file, for verify), SSH_ASKPASS and SSH_ASKPASS_REQUIRE unset: a key
 * with a passphrase and no agent holding it fails at once instead of prompting. The child is
 * killed after a time limit; whatever it printed on stderr becomes one sentence of the error.
 * CAPCHECK_SSH_KEYGEN names another ssh-keygen (cc_ssh_tool_default).
 *
 * Nothing here knows what is signed: harness/evidence/signature.c signs a run's manifest. */
#ifndef CAPCHECK_SSHSIG_H
#define CAPCHECK_SSHSIG_H

#include <stddef.h>

#define CC_SSH_TIMEOUT 60.0 /* seconds one ssh-keygen call may take */

typedef struct {
    const char *program; /* "ssh-keygen" (found on PATH), or a path */
    double timeout;      /* seconds; the child is killed after it */
} cc_ssh_tool;

/* ssh-keygen from CAPCHECK_SSH_KEYGEN when set and not empty, else from PATH; CC_SSH_TIMEOUT. */
void cc_ssh_tool_default(cc_ssh_tool *t);

/* What a signature says of itself (read, not verified). */
typedef struct {
    char fingerprint[64]; /* of the signing key, as ssh-keygen -l prints it: "SHA256:<base64>" */
    char key_type[48];    /* "ssh-ed25519", "ssh-rsa", ... */
    char ns[128];         /* the namespace it was made for */
} cc_ssh_sig_info;

/* Read the armored signature at sig_path. 0, or -1 with one sentence in msg. */
int cc_ssh_sig_read(const char *sig_path, cc_ssh_sig_info *out, char *msg, size_t len);

/* Sign the file at path with the private key file `key` (or the public one of a key ssh-agent
 * holds) for namespace ns: writes path.sig (an older one is removed first: ssh-keygen would
 * ask whether to overwrite it). 0, or -1 with one sentence in msg. */
int cc_ssh_sign(const cc_ssh_tool *t, const char *key, const char *ns, const char *path,
                char *msg, size_t len);

enum { CC_SSH_VERIFIED = 0, CC_SSH_NOT_ALLOWED = 1, CC_SSH_BAD = -1 };

/* Verify the signature sig_path of the file data_path for namespace ns against the
 * allowed-signers file `allowed` (git's gpg.ssh.allowedSignersFile format:
 * `principal[,principal...] [options] keytype base64key` per line): the principals the file
 * names for the signing key (ssh-keygen -Y find-principals), then ssh-keygen -Y verify as the
 * first of them. CC_SSH_VERIFIED with that principal in principal[0..plen); CC_SSH_NOT_ALLOWED
 * when the file names no principal for the key; CC_SSH_BAD with one sentence in msg when the
 * signature does not verify (another namespace, another file, a changed file) or ssh-keygen
 * cannot run. */
int cc_ssh_verify(const cc_ssh_tool *t, const char *allowed, const char *ns,
                  const char *data_path, const char *sig_path, char *principal, size_t plen,
                  char *msg, size_t len);

/* Check the signature with the key it carries, trusting no key (ssh-keygen -Y check-novalidate):
 * that it is a valid signature of data_path for namespace ns by whoever holds that key.
 * CC_SSH_VERIFIED, or CC_SSH_BAD with one sentence in msg. */
int cc_ssh_check(const cc_ssh_tool *t, const char *ns, const char *data_path,
                 const char *sig_path, char *msg, size_t len);

#endif
