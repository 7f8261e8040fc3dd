package cli

import (
	"errors"
	"strings"
)

// requireAudited checks what every audited write needs: a reason (why says what it should say)
// and the operator's identity.
func requireAudited(reason, operator, why string) error {
	if strings.TrimSpace(reason) == "" {
		return usageError{errors.New("--reason is required: " + why)}
	}
	if strings.TrimSpace(operator) == "" {
		return usageError{errors.New("--operator is required (or set BOARDREADYOPS_OPERATOR)")}
	}
	return nil
}
