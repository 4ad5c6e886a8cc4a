package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// apiError is an OpenAI-style error: the HTTP status and the body's error object. The message
// names the field or value at fault and what would fix it.
type apiError struct {
	Status  int
	Message string
	Type    string // invalid_request_error, server_error
	Param   string // the request field at fault ("" = null)
	Code    string // model_not_found, invalid_api_key, context_length_exceeded… ("" = null)
	Allow   string // for a 405: the methods the path takes (the Allow header)
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 invalid_request_error about param.
func badRequest(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, a...)}
}

// unauthorized is a 401 invalid_api_key.
func unauthorized(format string, a ...any) *apiError {
	return &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: fmt.Sprintf(format, a...)}
}

// serverError is a 5xx server_error.
func serverError(status int, format string, a ...any) *apiError {
	return &apiError{Status: status, Type: "server_error", Message: fmt.Sprintf(format, a...)}
}

// errorBody is the JSON an error is sent as: {"error": {"message", "type", "param", "code"}}.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	o := errorObject{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		o.Param = &e.Param
	}
	if e.Code != "" {
		o.Code = &e.Code
	}
	return errorBody{o}
}

// asAPIError turns any error into an apiError: itself when it is one, else a 500.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return serverError(http.StatusInternalServerError, "%v", err)
}

// writeError sends err as an error response.
func writeError(w http.ResponseWriter, err error) {
	ae := asAPIError(err)
	if ae.Allow != "" {
		w.Header().Set("Allow", ae.Allow)
	}
	writeJSON(w, ae.Status, ae.body())
}

// writeJSON sends v with status, leaving <, > and & readable (replies hold tags like <code>).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away: nothing left to tell it
}
