/*
 * libFuzzer harness for tlsid_issue(), the one parser of untrusted input
 * in gateway/tls/tlsid.c: a certificate request from an enrolling agent or
 * vhci host (protocol.md 1.10).
 *
 * Input: one flags byte, then the CSR.  Flags: bit 0, the rest is DER
 * and the harness wraps it in PEM (so mutations reach the ASN.1, not
 * only the base64); bit 1, the name comes from the CSR (name NULL)
 * instead of the gateway's "fz-1"; bit 2, role host instead of agent.
 * Checks, when a certificate is issued:
 *  - it parses, is signed by the CA, and its public key is the CSR's;
 *  - its CN passes tlsid_name_check() (and is "fz-1" when given), its
 *    OU is the role, it is for TLS clients only;
 *  - the fingerprint returned is 64 lowercase hex digits, the
 *    certificate's own;
 * when refused: no certificate, an error message; a PEM longer than
 * TLSID_CSR_MAX bytes is always refused.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "fuzz.h"
#include "tls/tlsid.h"

static struct tlsid_store *ca;

static FUZZ_NOCOV void
check_cert(const char *pem, const char *fpr, const char *csr, size_t csrlen,
    const char *name, enum tlsid_role role)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	X509_REQ *req;
	char cn[128], ou[32], f2[TLSID_FPR_HEX + 1];
	size_t i;

	BIO_free(b);
	CHECK(x != NULL);
	CHECK(X509_verify(x, X509_get0_pubkey(tlsid_store_ca(ca))) == 1);
	b = BIO_new_mem_buf(csr, (int)csrlen);
	req = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);
	BIO_free(b);
	CHECK(req != NULL);
	CHECK(EVP_PKEY_eq(X509_get0_pubkey(x), X509_REQ_get0_pubkey(req)) ==
	    1);
	X509_REQ_free(req);
	CHECK(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
	    NID_commonName, cn, sizeof(cn)) > 0);
	CHECK(tlsid_name_check(cn, NULL, 0) == 0);
	if (name != NULL)
		CHECK(strcmp(cn, name) == 0);
	CHECK(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
	    NID_organizationalUnitName, ou, sizeof(ou)) > 0);
	CHECK(strcmp(ou, tlsid_role_name(role)) == 0);
	CHECK(X509_check_purpose(x, X509_PURPOSE_SSL_CLIENT, 0) == 1);
	CHECK(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0) != 1);
	CHECK(strlen(fpr) == TLSID_FPR_HEX);
	for (i = 0; i < TLSID_FPR_HEX; i++)
		CHECK((fpr[i] >= '0' && fpr[i] <= '9') ||
		    (fpr[i] >= 'a' && fpr[i] <= 'f'));
	CHECK(tlsid_fpr(x, f2) == 0 && strcmp(f2, fpr) == 0);
	X509_free(x);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256], fpr[TLSID_FPR_HEX + 1], *out = NULL, *csr, *p;
	const char *name;
	enum tlsid_role role;
	size_t len;
	BIO *b = NULL;
	long n;
	int rv;

	if (size < 1 || size > 4 * TLSID_CSR_MAX)
		return 0;
	if (ca == NULL && (ca = tlsid_store_generate("fz-gw", err,
	    sizeof(err))) == NULL)
		abort();
	name = data[0] & 2 ? NULL : "fz-1";
	role = data[0] & 4 ? TLSID_ROLE_HOST : TLSID_ROLE_AGENT;
	if (data[0] & 1) {
		b = BIO_new(BIO_s_mem());
		if (b == NULL || PEM_write_bio(b, "CERTIFICATE REQUEST", "",
		    data + 1, (long)size - 1) <= 0 ||
		    (n = BIO_get_mem_data(b, &p)) <= 0) {
			BIO_free(b);
			return 0;
		}
		len = (size_t)n;
	} else {
		p = (char *)(uintptr_t)(data + 1);
		len = size - 1;
	}
	/* An exact-size copy, so ASan sees a read past its end. */
	csr = malloc(len > 0 ? len : 1);
	if (csr == NULL) {
		BIO_free(b);
		return 0;
	}
	memcpy(csr, p, len);
	BIO_free(b);
	err[0] = '\0';
	rv = tlsid_issue(ca, csr, len, name, role, 30, &out, fpr, err,
	    sizeof(err));
	CHECK(rv == 0 || rv == -1);
	if (rv == 0) {
		CHECK(len <= TLSID_CSR_MAX);
		CHECK(out != NULL);
		check_cert(out, fpr, csr, len, name, role);
	} else {
		CHECK(out == NULL);
		CHECK(err[0] != '\0');
		CHECK(fpr[0] == '\0');
	}
	free(out);
	free(csr);
	ERR_clear_error();
	return 0;
}
