"""What a grading shows people: the PR comment, the HTML feedback page, the class report."""
