package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error codes of the API (docs/dashboard-api.md).
const (
	codeBadParams       = "bad-params"
	codeBadCursor       = "bad-cursor"
	codeAuth            = "auth"
	codeForbidden       = "forbidden"
	codeNotFound        = "not-found"
	codeMethod          = "method-not-allowed"
	codeTooManyStreams  = "too-many-streams"
	codeTooManyRebuilds = "too-many-rebuilds"
	codeTooManyReads    = "too-many-reads"
	codeInternal        = "internal"
	codeUnavailable     = "unavailable"
)

// apiError is an answer other than 200: its status, code and a message for people; a refusal that passes says
// after how many seconds to try again (Retry-After; 0: none), a 405 which methods the route answers (Allow).
type apiError struct {
	status     int
	code       string
	message    string
	retryAfter int
	allow      string
}

func (e *apiError) Error() string { return fmt.Sprintf("httpapi: %s: %s", e.code, e.message) }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func badParams(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, codeBadParams, format, args...)
}

func badCursor(cursor string) *apiError {
	return errorf(http.StatusBadRequest, codeBadCursor, "cursor %q is not valid for this list; start again without cursor", cursor)
}

func notFound(format string, args ...any) *apiError {
	return errorf(http.StatusNotFound, codeNotFound, format, args...)
}

// Methods a route answers, as a 405 names them in its Allow header (RFC 9110 §15.5.6 requires one).
const (
	allowGet     = "GET"
	allowGetHead = "GET, HEAD"
	allowPost    = "POST"
)

// methodNotAllowed refuses a request's method on a route that answers only allow (an Allow header's value).
func methodNotAllowed(allow, format string, args ...any) *apiError {
	e := errorf(http.StatusMethodNotAllowed, codeMethod, format, args...)
	e.allow = allow
	return e
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers e as {"error":{"code","message"}}, with its Retry-After and its Allow if it has them.
func writeError(w http.ResponseWriter, e *apiError) {
	var b errorBody
	b.Error.Code, b.Error.Message = e.code, e.message
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="crewlog"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.allow != "" {
		w.Header().Set("Allow", e.allow)
	}
	writeJSONStatus(w, e.status, b)
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

// unencodable is the answer to a request whose answer json.Marshal refused.
const unencodable = `{"error":{"code":"internal","message":"the answer could not be encoded"}}`

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(unencodable)
	}
	writeBody(w, status, b)
}

// writeUnencodable answers that the answer could not be encoded, as writeJSONStatus does.
func writeUnencodable(w http.ResponseWriter) {
	writeBody(w, http.StatusInternalServerError, []byte(unencodable))
}

// writeBody answers b, JSON, with status.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func jsonBytes(v any) ([]byte, error) { return json.Marshal(v) }
