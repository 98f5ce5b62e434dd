// The token checks of docs/platforms-in-other-languages.md's golang-jwt row, run against the conformance
// vectors: `go run . DIR` prints one JSON summary of DIR's tokens.json (accept/refuse per vector, at each
// vector's fixed clock); exit 0 when every verdict agrees, 1 otherwise.
//
// golang-jwt checks the signature (RS256 only) and nothing else here: its own claim checks do not require
// sub or iat, do not bound iat's age, accept an aud array and read the system clock. So every claim is
// checked by hand (WithoutClaimsValidation), at the vector's clock. Debian 12 packages v4.4.3
// (golang-github-golang-jwt-jwt-dev); v5 has the same calls under the import path .../jwt/v5.
package main

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/golang-jwt/jwt/v4"
)

const maxTokenAge = 86400 // the longest lifetime the service can give a token
const maxTokenLength = 8192

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`) // RFC 6750 b64token

var profileTyp = map[string]string{"svc-native-jwt": "jwt", "oauth-at-jwt": "at+jwt"}

// Refused is a token that must not be accepted; Reason is a conformance reason code.
type Refused struct {
	Reason string
	Claim  string
	Status int
}

func (r *Refused) Error() string { return r.Reason }

func refuse(reason string) *Refused { return &Refused{Reason: reason, Status: 401} }

// Keys reads a JWKS: only RSA keys for RS256 signatures; anything else is ignored rather than trusted.
func Keys(jwks []byte) (map[string]*rsa.PublicKey, error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, err
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		kid, _ := k["kid"].(string)
		use, hasUse := k["use"].(string)
		alg, hasAlg := k["alg"].(string)
		if k["kty"] != "RSA" || kid == "" || (hasUse && use != "sig") || (hasAlg && alg != "RS256") {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(fmt.Sprint(k["n"]))
		e, errE := base64.RawURLEncoding.DecodeString(fmt.Sprint(k["e"]))
		if errN != nil || errE != nil || len(e) > 4 {
			continue
		}
		keys[kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys, nil
}

// normalTyp: RFC 7515 section 4.1.9, case-insensitive, the "application/" prefix optional.
func normalTyp(value any) string {
	s, _ := value.(string)
	return strings.TrimPrefix(strings.ToLower(s), "application/")
}

func number(claims jwt.MapClaims, name string) (float64, bool, *Refused) {
	value, present := claims[name]
	if !present {
		return 0, false, nil
	}
	n, isNumber := value.(json.Number) // WithJSONNumber: a JSON number, never a string that looks like one
	if !isNumber {
		return 0, true, &Refused{Reason: "invalid_claim", Claim: name, Status: 401}
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, true, &Refused{Reason: "invalid_claim", Claim: name, Status: 401}
	}
	return f, true, nil
}

// Verify returns the claims of a valid token, or a *Refused. now: seconds since the epoch; resources: the
// platform's resource identifiers (the scope file's resources), which an OAuth token names in aud.
func Verify(token string, keys map[string]*rsa.PublicKey, issuer, platformID string, now, leeway float64, resources []string) (jwt.MapClaims, error) {
	if len(token) > maxTokenLength || !tokenPattern.MatchString(token) {
		return nil, refuse("malformed")
	}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithJSONNumber(), jwt.WithoutClaimsValidation())
	// The alg is read first so that its refusal says so (golang-jwt reports it as an invalid signature).
	unverified, _, err := parser.ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return nil, refuse("malformed")
	}
	if unverified.Header["alg"] != "RS256" {
		return nil, refuse("alg_not_allowed")
	}
	claims := jwt.MapClaims{}
	parsed, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (interface{}, error) {
		// No extension is implemented here, so any critical one is refused (RFC 7515 section 4.1.11).
		if _, crit := t.Header["crit"]; crit {
			return nil, refuse("crit_not_supported")
		}
		kid, _ := t.Header["kid"].(string)
		key, known := keys[kid]
		if !known {
			return nil, refuse("unknown_kid")
		}
		return key, nil
	})
	if err != nil {
		var refused *Refused
		var validation *jwt.ValidationError
		switch {
		case errors.As(err, &refused):
			return nil, refused
		case errors.Is(err, jwt.ErrTokenSignatureInvalid),
			errors.As(err, &validation) && validation.Errors&jwt.ValidationErrorSignatureInvalid != 0:
			return nil, refuse("bad_signature")
		default:
			return nil, refuse("malformed")
		}
	}
	for _, name := range []string{"iss", "sub", "aud", "exp", "iat"} {
		if _, present := claims[name]; !present {
			return nil, &Refused{Reason: "missing_claim", Claim: name, Status: 401}
		}
	}
	if iss, _ := claims["iss"].(string); iss != issuer {
		return nil, refuse("wrong_iss")
	}
	// The service binds a token to one platform: aud is its id (a string), or exactly [resource, id] for a
	// token asked for a resource of this platform. An array holding only the id is refused.
	if aud, isString := claims["aud"].(string); !isString || aud != platformID {
		list, isList := claims["aud"].([]any)
		if !isList || len(list) != 2 || list[1] != platformID || !contains(append(resources, "urn:uuid:"+platformID), list[0]) {
			return nil, refuse("wrong_aud")
		}
	}
	nbf, hasNbf, bad := number(claims, "nbf")
	if bad != nil {
		return nil, bad
	}
	exp, _, bad := number(claims, "exp")
	if bad != nil {
		return nil, bad
	}
	iat, _, bad := number(claims, "iat")
	if bad != nil {
		return nil, bad
	}
	if sub, isString := claims["sub"].(string); !isString || sub == "" {
		return nil, &Refused{Reason: "invalid_claim", Claim: "sub", Status: 401}
	}
	switch {
	case hasNbf && nbf > now+leeway:
		return nil, refuse("not_yet_valid")
	case exp <= now-leeway, now-iat-leeway > maxTokenAge:
		return nil, refuse("expired")
	case iat > now+leeway:
		return nil, refuse("issued_in_future")
	}
	profile, _ := claims["svc_token_profile"].(string)
	want, known := profileTyp[profile]
	if !known {
		return nil, refuse("unknown_profile")
	}
	if normalTyp(parsed.Header["typ"]) != want {
		return nil, refuse("typ_mismatch")
	}
	return claims, nil
}

func contains(list []string, value any) bool {
	for _, s := range list {
		if s == value {
			return true
		}
	}
	return false
}

// Scopes: the space-separated scope claim, whole names.
func Scopes(claims jwt.MapClaims) []string {
	scope, _ := claims["scope"].(string)
	return strings.Fields(scope)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go-platform DIR (a conformance vectors directory)")
		os.Exit(2)
	}
	dir := os.Args[1]
	var file struct {
		Issuer  string  `json:"issuer"`
		Leeway  float64 `json:"clock_tolerance_seconds"`
		Vectors []struct {
			Name       string  `json:"name"`
			Token      string  `json:"token"`
			PlatformID string  `json:"platform_id"`
			Now        float64 `json:"now"`
			Route      struct {
				Scopes []string `json:"scopes"`
			} `json:"route"`
			Verdict string `json:"verdict"`
			Status  int    `json:"status"`
			Reason  string `json:"reason"`
		} `json:"vectors"`
	}
	tokens, err := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if err == nil {
		err = json.Unmarshal(tokens, &file)
	}
	jwks, errJ := os.ReadFile(filepath.Join(dir, "jwks.json"))
	if err != nil || errJ != nil {
		fmt.Fprintln(os.Stderr, "go-platform: cannot read the vectors:", err, errJ)
		os.Exit(2)
	}
	keys, err := Keys(jwks)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-platform: jwks.json:", err)
		os.Exit(2)
	}
	type failure struct {
		Name    string `json:"name"`
		Problem string `json:"problem"`
	}
	type result struct {
		Name    string `json:"name"`
		Verdict string `json:"verdict"`
		Status  int    `json:"status"`
		Reason  string `json:"reason,omitempty"`
	}
	summary := struct {
		Results []result  `json:"results"`
		Passed  int       `json:"passed"`
		Failed  []failure `json:"failed"`
		OK      bool      `json:"ok"`
	}{Results: []result{}, Failed: []failure{}}
	for _, v := range file.Vectors {
		got := result{Name: v.Name, Verdict: "accept", Status: 200}
		claims, err := Verify(v.Token, keys, file.Issuer, v.PlatformID, v.Now, file.Leeway, nil)
		if err == nil {
			held := Scopes(claims)
			for _, s := range v.Route.Scopes {
				if !contains(held, s) {
					err = &Refused{Reason: "insufficient_scope", Status: 403}
				}
			}
		}
		if err != nil {
			refused := err.(*Refused)
			got = result{Name: v.Name, Verdict: "reject", Status: refused.Status, Reason: refused.Reason}
		}
		summary.Results = append(summary.Results, got)
		if got.Verdict != v.Verdict || got.Status != v.Status || got.Reason != v.Reason {
			summary.Failed = append(summary.Failed, failure{v.Name, fmt.Sprintf("expected %s %d %s, got %s %d %s", v.Verdict, v.Status, v.Reason, got.Verdict, got.Status, got.Reason)})
		} else {
			summary.Passed++
		}
	}
	summary.OK = len(summary.Failed) == 0
	out, _ := json.MarshalIndent(summary, "", "  ")
	fmt.Println(string(out))
	if !summary.OK {
		os.Exit(1)
	}
}
