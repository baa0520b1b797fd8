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
// after how many seconds to try again (Retry-After; 0: none).
type apiError struct {
	status     int
	code       string
	message    string
	retryAfter int
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

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers e as {"error":{"code","message"}}, with its Retry-After if it has one.
func writeError(w http.ResponseWriter, e *apiError) {
	var b errorBody
	b.Error.Code, b.Error.Message = e.code, e.message
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="crewlog"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
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
