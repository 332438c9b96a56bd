package pkeyread

// ErrMADStatus is errMADStatus for the package's external tests.
var ErrMADStatus = errMADStatus

// NodeInfoSMP is a LID-routed NodeInfo Get with transaction id tid.
func NodeInfoSMP(tid uint32) []byte { return getSMP(attrNodeInfo, 0, 0, tid) }

// AnsweredPortGUID is the PortGUID of request's NodeInfo answer.
func AnsweredPortGUID(request, answer []byte) (uint64, error) {
	data, err := answerData(request, answer)
	if err != nil {
		return 0, err
	}
	return parseNodeInfo(data).portGUID, nil
}
