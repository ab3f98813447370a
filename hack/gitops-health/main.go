// Command paddock-gitops-health reads Kubernetes objects and says how GitOps tools see each: its
// kstatus (sigs.k8s.io/cli-utils, what Flux's kustomize-controller computes for its health
// checks) and, given the chart's Argo CD health script, what Argo CD's Lua engine
// (github.com/yuin/gopher-lua, the one Argo CD embeds) makes of it.
//
// Input on stdin: a JSON list of objects. Output on stdout: a JSON list, one entry per object:
// {"kstatus": "Current", "kstatusMessage": "...", "argo": "Healthy", "argoMessage": "..."}.
// The Lua script gets the object as the global `obj`, as Argo CD gives it, and returns a table
// with `status` and `message`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	KStatus        string `json:"kstatus"`
	KStatusMessage string `json:"kstatusMessage"`
	Argo           string `json:"argo,omitempty"`
	ArgoMessage    string `json:"argoMessage,omitempty"`
}

func main() {
	script := flag.String("lua", "", "an Argo CD health script (Lua) to run on each object")
	flag.Parse()
	// Numbers as the API machinery reads them (whole ones as int64), which kstatus expects.
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading the objects: %v", err)
	}
	var objects []map[string]interface{}
	if err := utiljson.Unmarshal(input, &objects); err != nil {
		fail("reading the objects: %v", err)
	}
	source := ""
	if *script != "" {
		text, err := os.ReadFile(*script)
		if err != nil {
			fail("reading %s: %v", *script, err)
		}
		source = string(text)
	}
	verdicts := make([]verdict, 0, len(objects))
	for _, object := range objects {
		result, err := status.Compute(&unstructured.Unstructured{Object: object})
		if err != nil {
			fail("kstatus: %v", err)
		}
		v := verdict{KStatus: result.Status.String(), KStatusMessage: result.Message}
		if source != "" {
			v.Argo, v.ArgoMessage = argo(source, object)
		}
		verdicts = append(verdicts, v)
	}
	if err := json.NewEncoder(os.Stdout).Encode(verdicts); err != nil {
		fail("writing: %v", err)
	}
}

// argo runs the health script on the object, as Argo CD's resource health does.
func argo(source string, object map[string]interface{}) (string, string) {
	state := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer state.Close()
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(source); err != nil {
		fail("lua: %v", err)
	}
	returned, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		fail("lua: the script returned no table")
	}
	return lua.LVAsString(returned.RawGetString("status")), lua.LVAsString(returned.RawGetString("message"))
}

func toLua(state *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []interface{}:
		table := state.NewTable()
		for _, item := range v {
			table.Append(toLua(state, item))
		}
		return table
	case map[string]interface{}:
		table := state.NewTable()
		for key, item := range v {
			table.RawSetString(key, toLua(state, item))
		}
		return table
	}
	fail("lua: a value of type %T", value)
	return lua.LNil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "paddock-gitops-health: "+format+"\n", args...)
	os.Exit(1)
}
