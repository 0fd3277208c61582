package worker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/workflows"
)

// SearchAttributeFlags returns the arguments that register the workflows'
// custom search attributes on `temporal server start-dev`
// (--search-attribute DqnBestValidSharpe=Double ...), sorted by name.
func SearchAttributeFlags() []string {
	names := searchAttributeNames()
	flags := make([]string, 0, 2*len(names))
	for _, n := range names {
		flags = append(flags, "--search-attribute", n+"="+typeName(workflows.SearchAttributes[n]))
	}
	return flags
}

// EnsureSearchAttributes registers, in namespace, the workflows' custom
// search attributes that are missing. An attribute registered with another
// type is an error: the workflows' upserts would fail their tasks.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enums.IndexedValueType{}
	for _, n := range searchAttributeNames() {
		want := workflows.SearchAttributes[n]
		got, ok := resp.GetCustomAttributes()[n]
		switch {
		case !ok:
			missing[n] = want
		case got != want:
			return fmt.Errorf("search attribute %s is registered in namespace %s as %s; dqnflow needs %s: remove it or use another namespace",
				n, namespace, typeName(got), typeName(want))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		var cmd []string
		for _, n := range searchAttributeNames() {
			if t, ok := missing[n]; ok {
				cmd = append(cmd, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s", namespace, n, typeName(t)))
			}
		}
		return fmt.Errorf("register search attributes in namespace %s: %w; register them with:\n  %s",
			namespace, err, strings.Join(cmd, "\n  "))
	}
	return nil
}

func searchAttributeNames() []string {
	names := make([]string, 0, len(workflows.SearchAttributes))
	for n := range workflows.SearchAttributes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// typeName is the CLI's name of an indexed value type ("Int", "Double"...).
func typeName(t enums.IndexedValueType) string {
	switch t {
	case enums.INDEXED_VALUE_TYPE_INT:
		return "Int"
	case enums.INDEXED_VALUE_TYPE_DOUBLE:
		return "Double"
	case enums.INDEXED_VALUE_TYPE_KEYWORD:
		return "Keyword"
	case enums.INDEXED_VALUE_TYPE_TEXT:
		return "Text"
	case enums.INDEXED_VALUE_TYPE_BOOL:
		return "Bool"
	case enums.INDEXED_VALUE_TYPE_DATETIME:
		return "Datetime"
	case enums.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	}
	return t.String()
}
