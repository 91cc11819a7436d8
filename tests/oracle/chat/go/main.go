// The Go reader of the chat-request oracle: each line of stdin is a
// base64 request body, decoded with encoding/json into the fields an
// OpenAI-compatible server written in Go declares (Ollama's shape: case-
// insensitive field matching, the last duplicate winning, as encoding/json
// does). One JSON line out each: the reading, or the error.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
)

type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
}

type request struct {
	Stream              *bool          `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		body, err := base64.StdEncoding.DecodeString(in.Text())
		var r request
		if err == nil {
			err = json.Unmarshal(body, &r)
		}
		reading := map[string]any{}
		if err != nil {
			reading["error"] = err.Error()
		} else {
			reading["stream"] = r.Stream != nil && *r.Stream
			reading["include_usage"] = r.StreamOptions != nil && r.StreamOptions.IncludeUsage != nil && *r.StreamOptions.IncludeUsage
			if r.MaxCompletionTokens != nil {
				reading["ceiling"] = *r.MaxCompletionTokens
			} else if r.MaxTokens != nil {
				reading["ceiling"] = *r.MaxTokens
			}
		}
		line, _ := json.Marshal(reading)
		fmt.Fprintln(out, string(line))
		out.Flush()
	}
}
